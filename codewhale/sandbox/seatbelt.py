"""macOS: Seatbelt (`sandbox-exec`) enforces the same rules where macOS can express them."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from codewhale.sandbox.spec import Probe, SandboxSpec, failure

# What Seatbelt cannot do that bwrap does. There is no PID namespace: a command that
# `setsid`s (or double-forks) leaves the process group, the only thing the shell tool
# kills, and can outlive the command and the app. There is no private /tmp: /tmp stays
# readable (a per-command scratch dir is the writable TMPDIR), so `SandboxSpec.visible`
# has nothing to do.
SANDBOX_EXEC = "/usr/bin/sandbox-exec"
_SEATBELT_DEVICES = ("/dev/null", "/dev/zero", "/dev/tty", "/dev/dtracehelper")


def seatbelt_arguments(sandbox_exec: str, spec: SandboxSpec, scratch: Path) -> list[str]:
    """The sandbox-exec command line (without the command) that enforces `spec`.

    `scratch` becomes the command's TMPDIR and its one writable place besides the
    workspace. The paths travel as `-D NAME=value`, never inside the profile's text, so
    no quote or parenthesis in a path can change a rule. The command starts in the
    caller's cwd: sandbox-exec has no --chdir.
    """
    arguments = [sandbox_exec, "-p", seatbelt_profile(spec)]
    for name, value in seatbelt_parameters(spec, scratch).items():
        arguments += ["-D", f"{name}={value}"]
    # The host's TMPDIR is read-only in here; the scratch dir is not.
    return [*arguments, "/usr/bin/env", f"TMPDIR={_real(scratch)}"]


def seatbelt_parameters(spec: SandboxSpec, scratch: Path) -> dict[str, str]:
    """The paths seatbelt_profile() names, resolved: Seatbelt matches resolved paths only
    (a rule for /tmp/x never matches, since /tmp is a link to /private/tmp)."""
    parameters = {"WORKSPACE": _real(spec.workspace), "SCRATCH": _real(scratch)}
    if spec.writable:
        for index, path in enumerate(spec.pinned):
            parameters[f"PINNED_{index}"] = _real(path)
        for index, path in enumerate(spec.read_only):
            parameters[f"READ_ONLY_{index}"] = _real(path)
    for index, path in enumerate(spec.hidden):
        parameters[_hidden_parameter(index)] = _real(path)
    return parameters


def seatbelt_profile(spec: SandboxSpec) -> str:
    """The Seatbelt (SBPL) profile that enforces `spec`, one rule a line.

    Where rules overlap the last one that matches decides, as the last mount does for
    bwrap. Paths appear only as `(param "NAME")`, filled in by seatbelt_parameters().
    """
    lines = [
        "(version 1)",
        "(allow default)",
        "; Writes go nowhere but the places allowed next.",
        "(deny file-write*)",
    ]
    if spec.writable:
        lines.append('(allow file-write* (subpath (param "WORKSPACE")))')
        if spec.pinned or spec.read_only:
            lines.append("; The repository's settings: `.git` stays put, its settings read-only.")
        for index in range(len(spec.pinned)):
            lines.append(f'(deny file-write* (literal (param "PINNED_{index}")))')
        for index in range(len(spec.read_only)):
            lines.append(f'(deny file-write* (subpath (param "READ_ONLY_{index}")))')
    lines += [
        "; The command's TMPDIR: macOS has no private /tmp to give it.",
        '(allow file-write* (subpath (param "SCRATCH")))',
        "; The devices a shell writes to: redirections, `<(...)`, here-documents.",
        *(f'(allow file-write* (literal "{device}"))' for device in _SEATBELT_DEVICES),
        '(allow file-write* (regex #"^/dev/fd/"))',
    ]
    if not spec.network:
        lines += [
            "; No network. With no network namespace to give the command a loopback of",
            "; its own, this denies the host's loopback (its local servers) too, and",
            "; connecting to Unix-domain sockets (an ssh agent, the Docker daemon).",
            "(deny network-outbound)",
            "(deny network-inbound)",
            "(deny network-bind)",
        ]
    lines += [
        "; Other processes are out of reach, macOS's counterpart of the PID namespace:",
        "; their arguments and environment (the app's API key) cannot be read, nor can",
        "; they be signalled. process-info* leaves the kern.procargs sysctls, which read",
        "; another process's arguments and environment, so they are denied by name.",
        "(deny process-info* (target others))",
        '(deny sysctl-read (sysctl-name-prefix "kern.procargs"))',
        "(deny signal)",
        "(allow signal (target same-sandbox))",
    ]
    if spec.hidden:
        lines.append("; Hidden paths last, so they win over the workspace rule.")
    for index, path in enumerate(spec.hidden):
        # A file (or socket) has nothing below it: `literal`, not `subpath`.
        kind = "subpath" if path.is_dir() else "literal"
        parameter = _hidden_parameter(index)
        lines.append(f'(deny file-read* file-write* ({kind} (param "{parameter}")))')
    return "\n".join(lines) + "\n"


def _hidden_parameter(index: int) -> str:
    return f"HIDDEN_{index}"


def _real(path: Path) -> str:
    return os.path.realpath(path)


def probe() -> Probe:
    """sandbox-exec if it can run `true` under the strictest profile we build, or why not."""
    if not os.path.exists(SANDBOX_EXEC):
        return Probe(None, f"{SANDBOX_EXEC} not found")
    with tempfile.TemporaryDirectory() as workspace, tempfile.TemporaryDirectory() as scratch:
        spec = SandboxSpec(Path(workspace), Path(workspace), writable=False, network=False)
        arguments = seatbelt_arguments(SANDBOX_EXEC, spec, Path(scratch))
        reason = failure([*arguments, "/bin/bash", "-c", "true"])
    if reason is not None:
        return Probe(None, f"sandbox-exec cannot start here: {reason}")
    return Probe(SANDBOX_EXEC, f"sandbox-exec ({SANDBOX_EXEC})")
