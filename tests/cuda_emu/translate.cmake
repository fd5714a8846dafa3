# Translates a .cu file for the CUDA kernel emulator (emu.h): every launch
#   kernel<<<grid, block>>>(args);
# becomes
#   ::saobp::cuda::emu::Launch(grid, block).run([=] { kernel(args); });
# and nothing else changes. A #line directive keeps the source's name in diagnostics. A launch
# it cannot rewrite (arguments with a ';', a configuration with a '>') stops the build, naming
# the file.
# cmake -DIN=src/x.cu -DOUT=build/x.cu.cpp -P translate.cmake
file(READ "${IN}" text)
set(name "[A-Za-z_][A-Za-z0-9_]*(<[^<>;(){}]*>)?")
string(REGEX REPLACE "(${name})[ \t\r\n]*<<<([^>;]*)>>>\\(([^;]*)\\);"
       "::saobp::cuda::emu::Launch(\\3).run([=] { \\1(\\4); });" text "${text}")
if(text MATCHES "<<<")
  message(FATAL_ERROR "${IN}: a kernel launch that translate.cmake cannot rewrite")
endif()
file(WRITE "${OUT}.tmp" "#line 1 \"${IN}\"\n${text}")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
