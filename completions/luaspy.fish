# fish completion for luaspy(1)
set -l cmds record top dump perf-map help
complete -c luaspy -f
complete -c luaspy -n "not __fish_seen_subcommand_from $cmds" -a record -d 'sample a process and write a profile'
complete -c luaspy -n "not __fish_seen_subcommand_from $cmds" -a top -d 'live view of the hottest functions'
complete -c luaspy -n "not __fish_seen_subcommand_from $cmds" -a dump -d 'print every thread stack once'
complete -c luaspy -n "not __fish_seen_subcommand_from $cmds" -a perf-map -d 'write /tmp/perf-PID.map for perf'
complete -c luaspy -n "not __fish_seen_subcommand_from $cmds" -a help -d 'help for a command'
complete -c luaspy -n "not __fish_seen_subcommand_from $cmds" -l version -d 'show the version'
complete -c luaspy -n "__fish_seen_subcommand_from help" -a 'record top dump perf-map'
# common
complete -c luaspy -n "__fish_seen_subcommand_from record top dump" -s p -l pid -x -a '(__fish_complete_pids)' -d 'profile the running process PID'
complete -c luaspy -n "__fish_seen_subcommand_from record top dump" -s i -l idle -d 'include sleeping threads'
complete -c luaspy -n "__fish_seen_subcommand_from record top dump" -s n -l native -d 'include native frames (default)'
complete -c luaspy -n "__fish_seen_subcommand_from record top dump" -l lua-only -d 'Lua frames only'
complete -c luaspy -n "__fish_seen_subcommand_from record top dump" -l timeout -x -d 'seconds to wait for a Lua runtime'
complete -c luaspy -n "__fish_seen_subcommand_from record top dump" -s v -l verbose -d 'say how the VM was found'
complete -c luaspy -n "__fish_seen_subcommand_from record top dump" -s h -l help -d 'show help'
# record and top
complete -c luaspy -n "__fish_seen_subcommand_from record top" -s r -l rate -x -d 'samples per second'
complete -c luaspy -n "__fish_seen_subcommand_from record top" -s d -l duration -x -d 'seconds to sample'
complete -c luaspy -n "__fish_seen_subcommand_from record top" -s s -l subprocesses -d 'also profile child processes'
complete -c luaspy -n "__fish_seen_subcommand_from record top" -l nonblocking -d 'never stop the target'
complete -c luaspy -n "__fish_seen_subcommand_from record top" -l blocking -d 'walk while the thread is stopped'
complete -c luaspy -n "__fish_seen_subcommand_from record top" -s F -l function -d 'aggregate by function'
complete -c luaspy -n "__fish_seen_subcommand_from record top" -l stats -d 'stop-time statistics'
# record
complete -c luaspy -n "__fish_seen_subcommand_from record" -s o -l output -r -F -d 'output file'
complete -c luaspy -n "__fish_seen_subcommand_from record" -s f -l format -x -a 'flamegraph folded speedscope pprof' -d 'output format'
complete -c luaspy -n "__fish_seen_subcommand_from record" -s t -l threads -d 'root frame per thread'
complete -c luaspy -n "__fish_seen_subcommand_from record" -l vmstate -d 'VM state as a leaf frame'
# top
complete -c luaspy -n "__fish_seen_subcommand_from top" -l delay -x -d 'seconds between refreshes'
# dump
complete -c luaspy -n "__fish_seen_subcommand_from dump" -l json -d 'one JSON object'
complete -c luaspy -n "__fish_seen_subcommand_from dump" -l all-coroutines -d 'also list every coroutine'
complete -c luaspy -n "__fish_seen_subcommand_from dump" -l native-only -d 'native frames only'
# perf-map
complete -c luaspy -n "__fish_seen_subcommand_from perf-map" -s p -l pid -x -a '(__fish_complete_pids)' -d 'LuaJIT process PID'
complete -c luaspy -n "__fish_seen_subcommand_from perf-map" -s d -l duration -x -d 'seconds to keep writing'
complete -c luaspy -n "__fish_seen_subcommand_from perf-map" -l perf-map-append -d 'add to an existing map'
complete -c luaspy -n "__fish_seen_subcommand_from perf-map" -s v -l verbose -d 'say how the VM was found'
complete -c luaspy -n "__fish_seen_subcommand_from perf-map" -s h -l help -d 'show help'
