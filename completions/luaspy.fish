# fish completion for luaspy(1)
set -l cmds record top dump heap report help
complete -c luaspy -f
complete -c luaspy -n "not __fish_seen_subcommand_from $cmds" -a record -d 'sample a process and write a profile'
complete -c luaspy -n "not __fish_seen_subcommand_from $cmds" -a top -d 'live view of the hottest functions'
complete -c luaspy -n "not __fish_seen_subcommand_from $cmds" -a dump -d 'print every thread stack once'
complete -c luaspy -n "not __fish_seen_subcommand_from $cmds" -a heap -d 'what the Lua heap holds'
complete -c luaspy -n "not __fish_seen_subcommand_from $cmds" -a report -d 'merge, filter, compare and convert saved profiles'
complete -c luaspy -n "not __fish_seen_subcommand_from $cmds" -a help -d 'help for a command'
complete -c luaspy -n "not __fish_seen_subcommand_from $cmds" -l version -d 'show the version'
complete -c luaspy -n "__fish_seen_subcommand_from help" -a 'record top dump heap report'
# common
complete -c luaspy -n "__fish_seen_subcommand_from record top dump heap" -s p -l pid -x -a '(__fish_complete_pids)' -d 'profile the running process PID'
complete -c luaspy -n "__fish_seen_subcommand_from record top dump" -s i -l idle -d 'include sleeping threads'
complete -c luaspy -n "__fish_seen_subcommand_from record top dump" -s n -l native -d 'include native frames (default)'
complete -c luaspy -n "__fish_seen_subcommand_from record top dump" -l lua-only -d 'Lua frames only'
complete -c luaspy -n "__fish_seen_subcommand_from record top dump" -l timeout -x -d 'seconds to wait for a Lua runtime'
complete -c luaspy -n "__fish_seen_subcommand_from record top dump heap report" -s v -l verbose -d 'say how the VM was found'
complete -c luaspy -n "__fish_seen_subcommand_from record top dump heap report" -s h -l help -d 'show help'
# record and top
complete -c luaspy -n "__fish_seen_subcommand_from record top" -s r -l rate -x -d 'samples per second'
complete -c luaspy -n "__fish_seen_subcommand_from record top" -s d -l duration -x -d 'seconds to sample'
complete -c luaspy -n "__fish_seen_subcommand_from record top" -s s -l subprocesses -d 'also profile child processes'
complete -c luaspy -n "__fish_seen_subcommand_from record top" -l nonblocking -d 'never stop the target'
complete -c luaspy -n "__fish_seen_subcommand_from record top" -l blocking -d 'walk while the thread is stopped'
complete -c luaspy -n "__fish_seen_subcommand_from record top report" -s F -l function -d 'aggregate by function'
complete -c luaspy -n "__fish_seen_subcommand_from record top" -l stats -d 'stop-time statistics'
complete -c luaspy -n "__fish_seen_subcommand_from record top" -l sampler -x -a 'ptrace perf auto' -d 'how samples are taken'
# record
complete -c luaspy -n "__fish_seen_subcommand_from record heap report" -s o -l output -r -F -d 'output file'
complete -c luaspy -n "__fish_seen_subcommand_from record report" -s f -l format -x -a 'flamegraph folded speedscope pprof callgrind top' -d 'output format'
complete -c luaspy -n "__fish_seen_subcommand_from record" -l period -x -d 'one profile per SECS seconds'
complete -c luaspy -n "__fish_seen_subcommand_from record" -l upload -x -d 'push each period to Grafana Pyroscope'
complete -c luaspy -n "__fish_seen_subcommand_from record" -l app -x -d 'application name for --upload'
complete -c luaspy -n "__fish_seen_subcommand_from record" -l tag -x -d 'a label for --upload, KEY=VALUE'
complete -c luaspy -n "__fish_seen_subcommand_from record" -l upload-header -x -d 'an HTTP header for --upload'
complete -c luaspy -n "__fish_seen_subcommand_from record" -s t -l threads -d 'root frame per thread'
complete -c luaspy -n "__fish_seen_subcommand_from record" -l vmstate -d 'VM state as a leaf frame'
# heap
complete -c luaspy -n "__fish_seen_subcommand_from heap" -s f -l format -x -a 'text heapsnapshot paths pprof' -d 'output format'
complete -c luaspy -n "__fish_seen_subcommand_from heap report" -l diff -r -F -d 'what grew since OLD (heap), the base profile (report)'
# top
complete -c luaspy -n "__fish_seen_subcommand_from top" -l delay -x -d 'seconds between refreshes'
# dump
complete -c luaspy -n "__fish_seen_subcommand_from dump" -l json -d 'one JSON object'
complete -c luaspy -n "__fish_seen_subcommand_from dump" -l all-coroutines -d 'also list every coroutine'
complete -c luaspy -n "__fish_seen_subcommand_from dump" -s s -l subprocesses -d 'also child processes, a block each'
complete -c luaspy -n "__fish_seen_subcommand_from dump" -l locals -d 'show local variables and upvalues of Lua frames'
complete -c luaspy -n "__fish_seen_subcommand_from dump" -l locals-length -x -d 'bytes of a string value shown'
complete -c luaspy -n "__fish_seen_subcommand_from dump" -l native-only -d 'native frames only'
complete -c luaspy -n "__fish_seen_subcommand_from dump" -l core -r -F -d 'read a core file'
complete -c luaspy -n "__fish_seen_subcommand_from dump" -l exe -r -F -d 'executable of the core'
# report
complete -c luaspy -n "__fish_seen_subcommand_from report" -F
complete -c luaspy -n "__fish_seen_subcommand_from report" -l focus -x -d 'keep stacks with a frame matching REGEX'
complete -c luaspy -n "__fish_seen_subcommand_from report" -l ignore -x -d 'drop stacks with a frame matching REGEX'
complete -c luaspy -n "__fish_seen_subcommand_from report" -l tid -x -d 'keep one thread'
complete -c luaspy -n "__fish_seen_subcommand_from report" -l nolineno -d 'drop line numbers'
