"""``dream-gym serve-agent``: an OpenAI-compatible server answering with a no-LLM agent."""

from __future__ import annotations

import argparse

from dream_gym.cli.options import BUILTIN_TASKS, parse_seed, port_number


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "serve-agent", help="serve a no-LLM discovery agent as an OpenAI-compatible chat API",
        description="An OpenAI-compatible chat-completions server on 127.0.0.1 whose answers come from the "
                    "built-in agent of --task, or for a task given as initial_program.py,evaluator.py from the "
                    "generic agent (seeded edits of the parent, crossover with the programs the prompt shows): "
                    "OpenEvolve (or any OpenAI-compatible system) runs without an LLM.")
    p.add_argument("--task", required=True,
                   help=f"a built-in task whose agent answers ({BUILTIN_TASKS}) or "
                        "initial_program.py,evaluator.py")
    p.add_argument("--port", type=port_number, default=8000, help="port on 127.0.0.1 (0: a free one; default 8000)")
    p.add_argument("--seed", type=parse_seed, default=0, help="seed of the agent's answers (same request, same answer)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import sys

    from dream_gym.online.agent_server import MODEL_NAME, AgentServer

    server = AgentServer(args.task, port=args.port, seed=args.seed)
    kind = "generic agent" if server.responder.generic is not None else "built-in agent"
    print(f"serving the {kind} of {args.task} as model {MODEL_NAME!r} at {server.base_url} "
          "(POST /chat/completions; Ctrl-C stops)", file=sys.stderr, flush=True)
    print(server.base_url, flush=True)
    try:
        server.serve_forever()
    finally:
        server.stop()
    return 0
