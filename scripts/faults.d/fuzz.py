"""Schemathesis: the API fuzzed from its OpenAPI document (GET /openapi.yaml)."""
import os
import shutil
import subprocess
import sys

from common import ADMIN_KEY


def run_schemathesis(port, examples, workdir, notifications_configured):
    if shutil.which("schemathesis") is None and subprocess.run([sys.executable, "-c", "import schemathesis"]).returncode != 0:
        return None, "schemathesis is not installed (scripts/setup installs it)"
    report = os.path.join(workdir, "schemathesis.junit.xml")
    command = ([sys.executable, "-m", "schemathesis.cli"] if shutil.which("schemathesis") is None else ["schemathesis"]) + [
        "run", f"http://127.0.0.1:{port}/openapi.yaml",
        "--header", f"Authorization: Bearer {ADMIN_KEY}",
        "--checks", "not_a_server_error,status_code_conformance,response_schema_conformance,content_type_conformance",
        "--max-examples", str(examples), "--seed", "1", "--workers", "1",
        "--phases", "examples,coverage,fuzzing,stateful",
        "--request-timeout", "15", "--no-shrink",
        "--report", "junit", "--report-junit-path", report,
        "--exclude-path", "/metrics",
    ]
    # Without a trusted root the notifications route answers 404 not_configured (documented), so
    # it is checked either way; `notifications_configured` only says which behaviour was tested.
    del notifications_configured
    env = dict(os.environ, NO_COLOR="1", SCHEMATHESIS_TELEMETRY="false")
    result = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env, cwd=workdir)
    output = result.stdout + result.stderr
    with open(os.path.join(workdir, "schemathesis.txt"), "w") as f:
        f.write(output)
    return result.returncode, output
