"""A stand-in for Cloudflare's `wrangler` in tests/mcp/test_worker_cli.py: `zodex sprite proxy
deploy` runs it as it would run wrangler (found on PATH, credential in the environment).

What is faithful: it is given `deploy --config DIR/wrangler.toml` in DIR, reads that file as
wrangler does (name, main, compatibility_date, [vars]), "deploys" the modules beside it by
starting the real Workers runtime (workerd) with exactly those files and variables, and reports
the Worker's URL in WRANGLER_OUTPUT_FILE_PATH the way wrangler does (`{"type":"deploy",
"targets":[URL]}`). What is simplified: no bundling (workerd loads the modules as they are), no
Cloudflare, and the URL is a loopback port (FAKE_WRANGLER_PORT).

It records what it saw in FAKE_WRANGLER_LOG: argv, its working directory, the files it was given
(name -> text) and whether CLOUDFLARE_API_TOKEN reached it through the environment.
"""

from __future__ import annotations

import json
import os
import sys
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import worker as w  # noqa: E402


def main() -> int:
    log = Path(os.environ["FAKE_WRANGLER_LOG"])
    log.mkdir(parents=True, exist_ok=True)
    argv = sys.argv[1:]
    cwd = Path.cwd()
    files = {p.name: p.read_text() for p in sorted(cwd.iterdir()) if p.is_file()}
    (log / "seen.json").write_text(json.dumps({
        "argv": argv,
        "cwd": str(cwd),
        "files": files,
        "token_in_env": os.environ.get("CLOUDFLARE_API_TOKEN", ""),
    }))
    if argv[:2] != ["deploy", "--config"] or len(argv) != 3:
        print(f"fake wrangler: unexpected arguments {argv}", file=sys.stderr)
        return 2
    config = tomllib.loads(Path(argv[2]).read_text())
    print(f"fake wrangler: deploying {config['name']}")
    vars_ = config["vars"]
    worker = w.start_worker(
        log / "runtime", vars_["SPRITE_ORIGIN"], sprite=vars_["SPRITE_NAME"], build=vars_["ZODEX_BUILD"],
        version=vars_["ZODEX_VERSION"], sources=cwd, port=int(os.environ["FAKE_WRANGLER_PORT"]),
        compatibility_date=config["compatibility_date"], detach=True,
    )
    (log / "workerd.pid").write_text(str(worker.proc.pid))
    with open(os.environ["WRANGLER_OUTPUT_FILE_PATH"], "a") as out:
        out.write(json.dumps({"type": "wrangler-session", "version": 1}) + "\n")
        out.write(json.dumps({"type": "deploy", "version": 1, "worker_name": config["name"],
                              "targets": [worker.base]}) + "\n")
    print(f"fake wrangler: deployed {config['name']} at {worker.base}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
