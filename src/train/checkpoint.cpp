#include "train/checkpoint.h"

#include <unistd.h>

#include <filesystem>

#include "core/fs.h"
#include "model/safetensors.h"

namespace saobp {

namespace fs = std::filesystem;

namespace {

void copy_into(const SafetensorsFile& f, const std::string& name, Tensor& dst) {
  if (!f.has(name))
    fail("checkpoint", "{}: tensor '{}' is missing; the checkpoint does not match this model", f.path, name);
  const Tensor& src = f.get(name);
  if (src.shape() != dst.shape() || src.dtype() != dst.dtype())
    fail("checkpoint", "{}: tensor '{}' is {} but the model has {}", f.path, name, src.str(), dst.str());
  dst.copy_from(src);
}

// copy_into found every expected name, so any further tensor is one the model does not have.
void check_no_extra(const SafetensorsFile& f, size_t expected) {
  if (f.tensors.size() > expected)
    fail("checkpoint", "{}: holds {} tensors, the model expects {}; it was saved from a different model",
         f.path, f.tensors.size(), expected);
}

}  // namespace

void save_checkpoint(const std::string& dir, const CheckpointContents& c) {
  const fs::path final_dir(dir);
  if (final_dir.has_parent_path()) fs::create_directories(final_dir.parent_path());
  const fs::path tmp = final_dir.string() + fmt::format(".tmp-{}", ::getpid());
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  std::vector<NamedTensor> model, optim;
  for (const Var& p : c.params->all()) model.push_back({p.name(), p.data()});
  save_safetensors((tmp / "model.safetensors").string(), model, {{"format", "pt"}});
  if (c.optimizer) {
    const AdamW& opt = *c.optimizer;
    for (size_t i = 0; i < opt.params().size(); ++i) {
      optim.push_back({opt.params()[i].name() + ".exp_avg", opt.first_moments()[i]});
      optim.push_back({opt.params()[i].name() + ".exp_avg_sq", opt.second_moments()[i]});
    }
    save_safetensors((tmp / "optimizer.safetensors").string(), optim,
                     {{"optimizer", "adamw"}, {"steps", std::to_string(opt.steps_taken())}});
  }
  const nlohmann::json state = {{"step", c.state.step},
                                {"data_position", c.state.data_position},
                                {"config_hash", fmt::format("{:016x}", c.state.config_hash)},
                                {"seed", c.state.seed},
                                {"ranks", c.state.ranks},
                                {"grad_accum", c.state.grad_accum},
                                {"optimizer_steps", c.optimizer ? c.optimizer->steps_taken() : 0}};
  write_file_atomic((tmp / "trainer_state.json").string(), state.dump(2) + "\n");
  write_file_atomic((tmp / "config.json").string(), c.hf_config.dump(2) + "\n");
  write_file_atomic((tmp / "config.toml").string(), c.config_toml);
  if (c.tokenizer) c.tokenizer->save(tmp.string());
  // Swap into place: the old checkpoint (if any) is removed only once the new one is complete.
  const fs::path old = final_dir.string() + fmt::format(".old-{}", ::getpid());
  if (fs::exists(final_dir)) fs::rename(final_dir, old);
  fs::rename(tmp, final_dir);
  fs::remove_all(old);
}

void load_weights(const std::string& dir, ParamStore& params) {
  const SafetensorsFile f = load_safetensors((fs::path(dir) / "model.safetensors").string());
  for (const Var& p : params.all()) {
    Tensor d = p.data();
    copy_into(f, p.name(), d);
  }
  check_no_extra(f, params.all().size());
}

TrainerState load_training_state(const std::string& dir, AdamW& opt) {
  const SafetensorsFile f = load_safetensors((fs::path(dir) / "optimizer.safetensors").string());
  for (size_t i = 0; i < opt.params().size(); ++i) {
    copy_into(f, opt.params()[i].name() + ".exp_avg", opt.first_moments()[i]);
    copy_into(f, opt.params()[i].name() + ".exp_avg_sq", opt.second_moments()[i]);
  }
  check_no_extra(f, 2 * opt.params().size());
  const std::string path = (fs::path(dir) / "trainer_state.json").string();
  TrainerState s;
  try {
    const nlohmann::json j = nlohmann::json::parse(read_file(path));
    s.step = j.at("step").get<int64_t>();
    s.data_position = j.at("data_position").get<int64_t>();
    s.config_hash = std::stoull(j.at("config_hash").get<std::string>(), nullptr, 16);
    s.seed = j.at("seed").get<uint64_t>();
    s.ranks = j.value("ranks", 1);
    s.grad_accum = j.value("grad_accum", 1);
    opt.set_steps_taken(j.at("optimizer_steps").get<int64_t>());
  } catch (const nlohmann::json::exception& e) {
    fail("checkpoint", "{}: {}; the checkpoint is damaged", path, e.what());
  } catch (const std::logic_error& e) {
    fail("checkpoint", "{}: bad config_hash ({}); the checkpoint is damaged", path, e.what());
  }
  return s;
}

}  // namespace saobp
