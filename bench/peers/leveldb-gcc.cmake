# CMake toolchain file for leveldb-sys (feature peer-leveldb), named by
# .cargo/config.toml. LevelDB 1.22 tests for clang's -Wthread-safety with a
# check that passes under GCC through the flags the cmake crate adds, then
# fails the build with "unrecognized command-line option". Answering the
# check here (before it runs) keeps GCC's build of LevelDB unchanged
# otherwise: the compiler, flags and build type are still the cmake crate's.
set(HAVE_CLANG_THREAD_SAFETY OFF CACHE BOOL "GCC has no -Wthread-safety")
