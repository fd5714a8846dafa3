# The CUDA emulator's build rules (README.md beside this file), included by the root
# CMakeLists.txt (the emulated backend, SAOBP_CUDA=EMU) and by tests/CMakeLists.txt (the kernel
# emulator of every test build).
set(SAOBP_EMU_DIR ${CMAKE_CURRENT_LIST_DIR})

# saobp_translate_cu(OUT_VAR files...): each .cu file (relative to the source root) translated
# for the emulator (translate.cmake) into the build folder; OUT_VAR gets the copies, which
# compile as C++ with emu.h in front (saobp_emulated_sources).
function(saobp_translate_cu out_var)
  set(outs)
  foreach(cu ${ARGN})
    string(REPLACE "/" "_" name ${cu})
    set(out ${CMAKE_BINARY_DIR}/cuda_emu/${name}.cpp)
    add_custom_command(OUTPUT ${out}
                       COMMAND ${CMAKE_COMMAND} -DIN=${CMAKE_SOURCE_DIR}/${cu} -DOUT=${out} -P
                               ${SAOBP_EMU_DIR}/translate.cmake
                       DEPENDS ${CMAKE_SOURCE_DIR}/${cu} ${SAOBP_EMU_DIR}/translate.cmake
                       COMMENT "Translating ${cu} for the CUDA emulator" VERBATIM)
    list(APPEND outs ${out})
  endforeach()
  set(${out_var} ${outs} PARENT_SCOPE)
endfunction()

# saobp_emulated_sources(files...): these sources see the emulator's shadow CUDA headers
# (include/) and its own folder, and the translated ones (named *.cu.cpp) and the bridge get
# emu.h forced in front, as device code.
function(saobp_emulated_sources)
  foreach(src ${ARGN})
    set(options -Wno-unknown-pragmas)
    if(src MATCHES "\\.cu\\.cpp$|bridge\\.cpp$")
      list(PREPEND options -include ${SAOBP_EMU_DIR}/emu.h)
    endif()
    set_source_files_properties(${src} PROPERTIES INCLUDE_DIRECTORIES "${SAOBP_EMU_DIR}/include;${SAOBP_EMU_DIR}"
                                COMPILE_OPTIONS "${options}")
  endforeach()
endfunction()

# The fibers (emu.cpp): Boost.Context, linked statically, so a test binary carried to a GPU
# machine needs no library beyond the product's.
set(Boost_USE_STATIC_LIBS ON)
find_package(Boost 1.74 REQUIRED COMPONENTS context)
