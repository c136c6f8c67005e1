-- For `make valgrind` (busted --helper, and lua5.4 -e "dofile(...)" before the fuzzer): keep C modules loaded
-- when the Lua state closes. lua_close would dlclose cudadev.so and unmap the static pointers to its
-- process-lifetime tables (device registry, kernel cache, the cpu device's allocation table and worker pool),
-- and memcheck would call those blocks lost; kept loaded, they are "still reachable", and a block that is lost
-- for real still shows.
setmetatable(debug.getregistry()._CLIBS, nil)
