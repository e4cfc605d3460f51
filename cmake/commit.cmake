# commit.cmake - writes OUT (gd_commit.h, for graphdiet --version) with SRC's git commit, at every
# build: cmake -DSRC=... -DOUT=... -P commit.cmake. OUT is rewritten only when the commit changes,
# so that main.c is compiled again only then. Outside a git checkout the commit is "unknown".
execute_process(COMMAND git -C "${SRC}" describe --always --dirty --abbrev=12
  OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR commit STREQUAL "")
  set(commit "unknown")
endif()
set(text "#define GD_COMMIT \"${commit}\"\n")
set(old "")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
