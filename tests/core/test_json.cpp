// core/json.h: the depth guard every reader of foreign JSON runs before it parses, and the
// excerpts messages show of foreign values.
#include <catch2/catch.hpp>
#include <string>

#include "core/error.h"
#include "core/json.h"

using namespace saobp;
using Catch::Matchers::Contains;

TEST_CASE("json: the depth guard finds the bracket that opens one level too many", "[core]") {
  const auto deep = [](int n) {
    return std::string(static_cast<size_t>(n), '[') + std::string(static_cast<size_t>(n), ']');
  };
  CHECK(json_too_deep_at(deep(kMaxJsonDepth)) == std::string_view::npos);
  CHECK(json_too_deep_at(deep(kMaxJsonDepth + 1)) == static_cast<size_t>(kMaxJsonDepth));
  CHECK(json_too_deep_at("{\"a\": [{\"b\": []}]}", 4) == std::string_view::npos);  // four levels
  CHECK(json_too_deep_at("{\"a\": [{\"b\": []}]}", 3) == 13);
  CHECK(json_too_deep_at("{\"a\": [{\"b\": []}]}", 2) == 7);
  // Brackets inside strings, escaped quotes included, do not count; closing brackets never go below 0.
  CHECK(json_too_deep_at("[\"[[[\\\"[[[\"]", 1) == std::string_view::npos);
  CHECK(json_too_deep_at("]]]][[", 1) == 5);
  // A value 10^5 deep: named by file, line and column, not a stack overflow.
  const std::string text = "{\"x\": 1,\n \"y\": " + deep(100000) + "}";
  CHECK_THROWS_WITH(check_json_depth(text, "f.json", "test"),
                    Contains("[test] f.json:2:") && Contains("nested deeper than 128 levels"));
  CHECK_THROWS_WITH(check_json_depth(deep(200), "g.jsonl", "test", 7), Contains("g.jsonl:7:129:"));
  CHECK_NOTHROW(check_json_depth(deep(3), "h.json", "test"));
}

TEST_CASE("json: a foreign value in a message is a short excerpt", "[core]") {
  CHECK(json_excerpt(nlohmann::json(3)) == "3");
  CHECK(json_excerpt(nlohmann::json(nullptr)) == "null");
  CHECK(json_excerpt(nlohmann::json("ab")) == "\"ab\"");
  CHECK(json_excerpt(nlohmann::json(std::string(50, 'x'))) ==
        "\"" + std::string(40, 'x') + "\" (cut; 50 bytes)");
  // Cut inside a UTF-8 sequence: replaced, not a throw.
  CHECK_NOTHROW(json_excerpt(nlohmann::json(std::string(39, 'x') + "\xC3\xA9" + std::string(20, 'y'))));
  CHECK(json_excerpt(nlohmann::json::array({1, 2, 3})) == "an array of 3");
  CHECK(json_excerpt(nlohmann::json::object({{"a", 1}})) == "an object of 1 key");
  CHECK(json_excerpt(nlohmann::ordered_json::object({{"a", 1}, {"b", 2}})) == "an object of 2 keys");
}

TEST_CASE("json: JsonFields reads each key as its type or names the file and the key", "[core]") {
  const nlohmann::json j = nlohmann::json::parse(
      R"({"s": "a", "i": 3, "big": 18446744073709551615, "f": 2.5, "huge": 1e300, "b": true, "n": null})");
  const JsonFields f(j, "x.json", "test");
  CHECK(f.string("s") == "a");
  CHECK(f.string("absent", "dflt") == "dflt");
  CHECK(f.integer("i") == 3);
  CHECK(f.integer("absent", -1) == -1);
  CHECK(f.number("i") == 3.0);
  CHECK(f.number("f") == 2.5);
  CHECK(f.boolean("b", false));
  // A float, an unsigned integer past int64_t and null are not integers: never cut or wrapped.
  CHECK_THROWS_WITH(f.integer("f"), Contains("[test] x.json: f is 2.5; expected an integer"));
  CHECK_THROWS_WITH(f.integer("huge"), Contains("huge is 1e+300; expected an integer"));
  CHECK_THROWS_WITH(f.integer("big"), Contains("big is 18446744073709551615; expected an integer"));
  CHECK_THROWS_WITH(f.integer("n", 0), Contains("n is null; expected an integer"));
  CHECK_THROWS_WITH(f.string("i"), Contains("i is 3; expected a string"));
  CHECK_THROWS_WITH(f.boolean("s", false), Contains("s is \"a\"; expected true or false"));
  CHECK_THROWS_WITH(f.number("absent"), Contains("x.json: absent is missing"));
  CHECK_THROWS_WITH(JsonFields(nlohmann::json::array({1, 2}), "y.json", "test"),
                    Contains("y.json: an array of 2; expected an object"));
}
