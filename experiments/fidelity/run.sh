#!/usr/bin/env bash
# The fidelity experiment: three tasks, ten policies (the nine built-ins and the coverage
# recorder), ten seeds, W = 2, one online run at a time: circle-packing-26 and sum-difference
# grown with dream-gym grow (30 attempts a run), OpenEvolve's function_minimization example
# run through the OpenEvolve bridge with the generic no-LLM agent (10 iterations a run).
# Recorders: the recording commands' defaults (grow's recommended; the bridge's native, OpenEvolve's own
# sampling), each policy's own runs, two pools of runs (coverage's and greedy's; all ten, coverage's
# first) and, on function_minimization, native pooled with coverage. Then circle-packing-26 through
# the ShinkaEvolve and SkyDiscover bridges (the built-in agent, 20 attempts a run; recorders as
# above, with native: the system's own selection).
# Study folders go to out/fidelity/exp-* (git-ignored); the small results are copied here.
# Run from the repository's root: bash experiments/fidelity/run.sh cp26|sd|fm, then requests
# (again, once the runs are done, it runs nothing and writes the same report); the two other
# systems: cp26-shinkaevolve, cp26-skydiscover.
set -euo pipefail
DG=".venv/bin/dream-gym"
OUT="out/fidelity"
POLICIES=(-p greedy -p fixed -p ucb -p puct -p hyperband -p shinka -p stagnation -p openevolve -p random -p coverage)
RECORDERS=(--recorder greedy --recorder fixed --recorder ucb --recorder puct --recorder hyperband
           --recorder shinka --recorder stagnation --recorder openevolve --recorder random --recorder coverage
           --recorder pool:coverage+greedy
           --recorder pool:coverage+greedy+fixed+ucb+puct+hyperband+shinka+stagnation+openevolve+random)
FM=/work/shared/openevolve-examples/function_minimization
mkdir -p "$OUT"

study() {  # study NAME ARGS...: one dream-gym fidelity study, its table and log beside its folder
    local name=$1; shift
    /usr/bin/time -f "%e s wall" nice -n 10 "$DG" fidelity "$@" "${POLICIES[@]}" "${RECORDERS[@]}" \
        --seeds "${SEEDS:-0-9}" -W 2 -j 1 --out "$OUT/$name" >"$OUT/$name.txt" 2>>"$OUT/$name.log"
}

case "${1:?cp26, sd, fm, cp26-shinkaevolve, cp26-skydiscover or requests}" in
    cp26) study exp-cp26-grow --task circle-packing-26 -n 30 --recorder recommended ;;
    sd) study exp-sd-grow --task sum-difference -n 30 --recorder recommended ;;
    fm) # seeds 0-5 first, then 0-9: a study cut short keeps whole seeds (its runs go policy by policy)
        for seeds in 0-5 0-9; do
            SEEDS=$seeds study exp-fm-openevolve --system openevolve --task "$FM/initial_program.py,$FM/evaluator.py" \
                -n 10 --recorder native --recorder pool:native+coverage
        done ;;
    cp26-shinkaevolve) study exp-cp26-shinkaevolve --system shinkaevolve --task circle-packing-26 -n 20 --recorder native ;;
    cp26-skydiscover) study exp-cp26-skydiscover --system skydiscover --task circle-packing-26 -n 20 --recorder native ;;
    requests) # the same runs replayed in request mode: copies of the study folders (nothing runs online)
        for name in exp-cp26-grow exp-sd-grow exp-fm-openevolve; do
            [ -d "$OUT/$name-requests" ] || cp -r "$OUT/$name" "$OUT/$name-requests"
        done
        study exp-cp26-grow-requests --task circle-packing-26 -n 30 --recorder recommended --requests
        study exp-sd-grow-requests --task sum-difference -n 30 --recorder recommended --requests
        study exp-fm-openevolve-requests --system openevolve --task "$FM/initial_program.py,$FM/evaluator.py" \
            -n 10 --recorder native --recorder pool:native+coverage --requests ;;
    *) echo "usage: $0 cp26|sd|fm|cp26-shinkaevolve|cp26-skydiscover|requests" >&2; exit 2 ;;
esac
