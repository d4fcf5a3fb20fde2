"""The simulated model's profiles: a generated repository and the user who works in it.

A profile names two things, both a pure function of the seed:

- `generate_workspace(root, seed)`: a real workspace the tools act on, a small Python package with
  unittest tests, docs, logs (one of them huge) and a large generated CSV data file. The same seed
  writes byte-identical files.
- `user_prompts(profile, turns, seed)`: what the profile's user types, turn by turn. Every profile
  plants facts early ("Note for later: the staging port is 6543.") and asks for them much later
  ("What is the staging port?"), so a session measures whether compaction lost them. With
  `output_facts=True` the user also runs scripts whose long output states a value once, in
  passing ("the stress test seed is 48213."), and asks for it much later: a fact only a tool
  result ever held, which masking or clearing old results can lose (`output_facts_for`). With
  `references=True` the user also refers back to earlier work (`references_for`): a file the model
  changed ("the module you changed when we fixed the rounding bug"), a test a script's run saw fail
  ("the test that failed in the parser check"), a decision the user made ("Let's keep the cache
  key as a (path, mtime) tuple, not a content hash."). None of them is shaped like a fact: the
  file is named only by the model's own calls and answer, the failing test only by one line of a
  long output, and only what the request still holds of that work tells the model which it was.

No prompt is typed twice in a session (a repeated request says which turn it is): the model draws
each turn's workload from the prompt's text alone, so the prompt is the turn's id and the work a
session asks for is the user's, whatever a strategy left visible.

Profiles: `feature` (a long feature build), `debug` (a debugging hunt through huge logs),
`refactor` (changes across many files), `swe` (SWE-agent-like: reading and running dominate, tool
results are about 80% of the tokens). The model never reads this module: it acts on the request
alone (`model.py`); this module only shapes the world and the user.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

__all__ = [
    "PROFILES",
    "Fact",
    "Reference",
    "facts_for",
    "generate_workspace",
    "output_facts_for",
    "package_name",
    "planted_facts",
    "reference_positions",
    "references_for",
    "user_prompts",
]

PROFILES: tuple[str, ...] = ("feature", "debug", "refactor", "swe")

_MODULES: tuple[str, ...] = (
    "money",
    "pricing",
    "inventory",
    "orders",
    "customers",
    "shipping",
    "taxes",
    "reports",
    "storage",
    "parser",
    "settings",
    "scheduler",
)
_NAMES = ("ledgerly", "stockpot", "parcelkit", "tallyho")
_VERBS = ("compute", "load", "merge", "check", "render", "split", "count", "apply", "scale", "find")
_NOUNS = ("total", "batch", "entry", "rate", "window", "record", "quota", "limit", "bucket", "slot")


@dataclass(frozen=True, slots=True)
class Fact:
    """A fact the user states early and asks for later."""

    subject: str
    value: str
    script: str | None = None
    """For a fact only a tool result states: the workspace script whose output states it."""

    @property
    def statement(self) -> str:
        """How the user states it (for an output fact: how the user has the script run)."""
        if self.script is not None:
            return f"Run `sh {self.script}` and tell me whether it passes."
        return f"Note for later: {self.line}"

    @property
    def line(self) -> str:
        """The sentence that states it, as the user types it or the script prints it."""
        return f"the {self.subject} is {self.value}."

    @property
    def question(self) -> str:
        """How the user asks for it."""
        return f"What is the {self.subject}?"


def _rng(seed: int, *parts: object) -> random.Random:
    digest = hashlib.sha256(repr((seed, *parts)).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def package_name(seed: int) -> str:
    """The generated package's import name."""
    return _NAMES[seed % len(_NAMES)]


def facts_for(seed: int) -> tuple[Fact, ...]:
    """The facts a session's user plants (the same for every profile of a seed)."""
    rng = _rng(seed, "facts")
    return (
        Fact("staging port", str(rng.randrange(2000, 9999))),
        Fact("release codename", rng.choice(("amber-falcon", "quiet-heron", "iron-lynx", "salt-otter"))),
        Fact("on-call reviewer", rng.choice(("Priya Natarajan", "Tomas Berg", "Ada Okafor", "Lena Weiss"))),
        Fact("database retry limit", str(rng.randrange(3, 17))),
        Fact("feature flag name", f"ff_{rng.choice(_NOUNS)}_{rng.randrange(100, 999)}"),
    )


def output_facts_for(seed: int) -> tuple[Fact, ...]:
    """The facts only a script's output states, once, among many lines of progress."""
    rng = _rng(seed, "output facts")
    return (
        Fact("stress test seed", str(rng.randrange(10_000, 99_999)), "scripts/stress_check.sh"),
        Fact("preview deploy id", f"dep-{rng.randrange(100_000, 999_999)}", "scripts/deploy_preview.sh"),
        Fact("migration batch id", f"mb{rng.randrange(1000, 9999)}", "scripts/migrate_dry_run.sh"),
    )


def _script(fact: Fact, rng: random.Random, steps: int = 60) -> str:
    """A shell script printing `steps` lines of progress, the fact's sentence once among them."""
    at = rng.randrange(steps // 4, 3 * steps // 4)
    lines = []
    for n in range(steps):
        if n == at:
            lines.append(fact.line)
        module = rng.choice(_MODULES)
        ms = rng.randrange(3, 400)
        lines.append(
            f"step {n + 1:3}/{steps}: {rng.choice(_VERBS)} {module} {rng.choice(_NOUNS)} ok ({ms} ms)"
        )
    lines.append(f"{steps} steps passed")
    return "#!/bin/sh\ncat <<'EOF'\n" + "\n".join(lines) + "\nEOF\n"


ReferenceKind = Literal["file", "result", "decision"]


@dataclass(frozen=True, slots=True)
class Reference:
    """Earlier work a later prompt refers to by what was done, never by name (`references_for`)."""

    kind: ReferenceKind
    topic: str
    """What both prompts name it by: the bug fixed, the check run, the subject decided."""
    referent: str
    """What the later turn needs: the changed file's path, the failing test's unittest id, the
    decided value."""
    statement: str
    """The early prompt: a fix the model makes, a script it runs, the user's decision."""
    question: str
    """The later prompt that refers back."""
    target: str
    """What a referring turn's calls hold when it found the referent: the changed module's tests, the
    failing test's dotted name, the decided value."""
    recovery: str = ""
    """What a call of a turn that had to recover holds: the fix's mark it searched the tree for, the
    script it ran again, the decision's words it searched a named transcript for (with none named, a
    decision cannot be recovered)."""
    script: str | None = None
    """For a result: the workspace script whose output names the failing test."""

    @property
    def note(self) -> str:
        """The sentence that carries the referent (the `limit` oracle's note)."""
        if self.kind == "file":
            return f"When we fixed the {self.topic} we changed {self.referent}."
        if self.kind == "result":
            return f"The test that failed in the {self.topic}: {self.referent}."
        return self.statement


_BUGS = ("rounding bug", "clamp order bug", "offset bug", "overflow bug", "sign bug", "scaling bug")
_DECISIONS = (
    ("cache key", "a (path, mtime) tuple", "a content hash"),
    ("retry delay", "exponential backoff capped at 30 s", "a fixed 5 s pause"),
    ("error type", "a ValueError subclass", "a bare Exception"),
    ("config format", "TOML", "JSON"),
)
_REFERENCE_KINDS: tuple[ReferenceKind, ...] = ("file", "result", "decision", "file")


def _functions(seed: int, module: str) -> list[str]:
    """The generated functions of `module` (`_module_files`), in order."""
    source, _ = _module_files(package_name(seed), module, _rng(seed, "module", module))
    return [line[4:].split("(")[0] for line in source.splitlines() if line.startswith("def ")]


def _test_id(module: str, function: str) -> str:
    cls = "".join(part.capitalize() for part in module.split("_"))
    return f"test_{function} (tests.test_{module}.Test{cls})"


def references_for(seed: int) -> tuple[Reference, ...]:
    """The earlier work a session of `seed` refers back to (the same for every profile of a seed):
    two fixed files, one failing test, one decision, each on its own module."""
    rng = _rng(seed, "references")
    pkg = package_name(seed)
    modules = rng.sample(_MODULES, len(_REFERENCE_KINDS) + 1)
    bugs = rng.sample(_BUGS, 2)
    out: list[Reference] = []
    for kind, module in zip(_REFERENCE_KINDS, modules, strict=False):
        if kind == "file":
            bug = bugs.pop()
            function = rng.choice(_functions(seed, module))
            out.append(
                Reference(
                    "file",
                    bug,
                    f"src/{pkg}/{module}.py",
                    f"Fix the {bug} in `{function}`.",
                    f"Rerun the tests of the module you changed when we fixed the {bug}.",
                    target=f"tests.test_{module}",
                    recovery=f"fixed: {bug}",
                )
            )
        elif kind == "result":
            function = rng.choice(_functions(seed, module))
            script = f"scripts/{module}_check.sh"
            test = _test_id(module, function)
            name, where = test[:-1].split(" (")
            out.append(
                Reference(
                    "result",
                    f"{module} check",
                    test,
                    f"Run `sh {script}` and tell me whether it passes.",
                    f"Rerun the test that failed in the {module} check.",
                    target=f"{where}.{name}",
                    recovery=PurePosixPath(script).name,
                    script=script,
                )
            )
        else:
            subject, value, rejected = rng.choice(_DECISIONS)
            out.append(
                Reference(
                    "decision",
                    subject,
                    value,
                    f"Let's keep the {subject} as {value}, not {rejected}.",
                    f"Apply the decision on the {subject} to the {modules[-1]} module.",
                    target=value,
                    recovery=f"keep the {subject} as",
                )
            )
    return tuple(out)


def _check_script(seed: int, reference: Reference) -> str:
    """A test run that lists every test of the package and fails the reference's one (exit 1)."""
    tests = [_test_id(module, function) for module in _MODULES for function in _functions(seed, module)]
    lines = [f"{test} ... {'FAIL' if test == reference.referent else 'ok'}" for test in tests]
    rng = _rng(seed, "check", reference.referent)
    got = rng.randrange(10, 900)
    lines += [
        "",
        "=" * 70,
        f"FAIL: {reference.referent}",
        "-" * 70,
        "Traceback (most recent call last):",
        f"AssertionError: {got + 1} != {got}",
        "",
        "-" * 70,
        f"Ran {len(lines)} tests in 0.{rng.randrange(100, 999)}s",
        "",
        "FAILED (failures=1)",
    ]
    return "#!/bin/sh\ncat <<'EOF'\n" + "\n".join(lines) + "\nEOF\nexit 1\n"


# --- the workspace ---------------------------------------------------------------------------------


def _function(rng: random.Random, module: str, index: int) -> tuple[str, str, int, int]:
    """One generated function: its source, its name, a sample argument and the expected result."""
    name = f"{rng.choice(_VERBS)}_{rng.choice(_NOUNS)}_{index}"
    factor, offset = rng.randrange(2, 9), rng.randrange(0, 50)
    sample = rng.randrange(1, 100)
    body = (
        f"def {name}(value: int) -> int:\n"
        f'    """{name.replace("_", " ").capitalize()} for the {module} module.\n\n'
        f"    Scales `value` by {factor} and adds the {module} offset ({offset}); negative input is\n"
        f'    clamped to zero first, as the {module} rules require.\n    """\n'
        f"    if value < 0:\n"
        f"        value = 0\n"
        f"    scaled = value * {factor}\n"
        f"    result = scaled + {offset}\n"
        f"    return result\n"
    )
    return body, name, sample, sample * factor + offset


def _module_files(pkg: str, module: str, rng: random.Random) -> tuple[str, str]:
    functions = [_function(rng, module, i) for i in range(rng.randrange(4, 10))]
    source = (
        f'"""The {module} module of {pkg}: helpers the other modules call."""\n\n'
        "from __future__ import annotations\n\n"
        f"{module.upper()}_VERSION = {rng.randrange(1, 9)}\n"
        f"{module.upper()}_TIMEOUT_S = {rng.randrange(5, 120)}\n\n\n"
        + "\n\n".join(body for body, *_ in functions)
    )
    cls = "".join(part.capitalize() for part in module.split("_"))
    tests = (
        f'"""Tests for {pkg}.{module}."""\n\n'
        "import sys\nimport unittest\nfrom pathlib import Path\n\n"
        'sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))\n\n'
        f"from {pkg} import {module}  # noqa: E402\n\n\n"
        f"class Test{cls}(unittest.TestCase):\n"
        + "\n".join(
            f"    def test_{name}(self) -> None:\n"
            f"        self.assertEqual({module}.{name}({sample}), {expected})\n"
            f"        self.assertEqual({module}.{name}(-1), {module}.{name}(0))\n"
            for _, name, sample, expected in functions
        )
        + '\n\nif __name__ == "__main__":\n    unittest.main()\n'
    )
    return source, tests


def _doc(pkg: str, title: str, rng: random.Random, paragraphs: int) -> str:
    words = [*_VERBS, *_NOUNS, *_MODULES, "the", "a", "of", "when", "and", "is", "each", pkg]
    out = [f"# {title}\n"]
    for n in range(paragraphs):
        if n % 4 == 0:
            out.append(f"## {rng.choice(_MODULES).capitalize()} {rng.choice(_NOUNS)}s\n")
        sentences = (
            " ".join(rng.choice(words) for _ in range(rng.randrange(8, 16))).capitalize() + "."
            for _ in range(rng.randrange(3, 7))
        )
        out.append(" ".join(sentences) + "\n")
    return "\n".join(out)


def _log(rng: random.Random, lines: int, errors: int) -> str:
    levels = ("INFO", "INFO", "INFO", "DEBUG", "DEBUG", "WARNING")
    error_at = set(rng.sample(range(lines // 3, lines), errors))
    out = []
    for n in range(lines):
        stamp = f"2026-03-{1 + n * 28 // lines:02d}T{n % 24:02d}:{n % 60:02d}:{(n * 7) % 60:02d}Z"
        module = rng.choice(_MODULES)
        if n in error_at:
            out.append(f"{stamp} ERROR {module}: {rng.choice(_NOUNS)} timeout after {rng.randrange(5, 90)}s")
            out.append("Traceback (most recent call last):")
            out.append(f'  File "src/{module}.py", line {rng.randrange(10, 90)}, in {rng.choice(_VERBS)}')
            out.append(f"TimeoutError: {module} {rng.choice(_NOUNS)} did not finish")
        else:
            level = rng.choice(levels)
            job = rng.randrange(10_000, 99_999)
            out.append(f"{stamp} {level} {module}: job {job} {rng.choice(_VERBS)} {rng.choice(_NOUNS)} ok")
    return "\n".join(out) + "\n"


def _data(rng: random.Random, rows: int) -> str:
    out = ["id,region,sku,quantity,unit_price,status"]
    regions = ("north", "south", "east", "west", "central")
    statuses = ("ok", "ok", "ok", "ok", "late", "returned")
    for n in range(rows):
        out.append(
            f"{n},{rng.choice(regions)},SKU-{rng.randrange(1000, 9999)},{rng.randrange(1, 500)},"
            f"{rng.randrange(100, 99_999) / 100:.2f},{rng.choice(statuses)}"
        )
    return "\n".join(out) + "\n"


def generate_workspace(
    root: Path, seed: int, *, data_rows: int = 40_000, log_lines: int = 6_000, references: bool = False
) -> Path:
    """Write the profile repository under `root` (created); the same seed writes the same bytes.

    Args:
        root: The workspace directory.
        seed: Decides names, numbers, sizes and contents.
        data_rows: Rows of `data/measurements.csv` (about 40 characters each).
        log_lines: Lines of `logs/worker.log` (the huge log).
        references: Also write the check scripts the user's references run (`references_for`).

    Returns:
        `root`.
    """
    pkg = package_name(seed)
    files: dict[str, str] = {
        "README.md": (
            f"# {pkg}\n\nA small inventory and pricing package.\n\n"
            "Run the tests with `python -m unittest discover -s tests -q`.\n"
        ),
        "pyproject.toml": f'[project]\nname = "{pkg}"\nversion = "0.{seed % 10}.0"\n',
        f"src/{pkg}/__init__.py": f'"""{pkg}: inventory and pricing helpers."""\n',
        "tests/__init__.py": "",
    }
    for module in _MODULES:
        source, tests = _module_files(pkg, module, _rng(seed, "module", module))
        files[f"src/{pkg}/{module}.py"] = source
        files[f"tests/test_{module}.py"] = tests
    for title, size in (("architecture", 24), ("usage", 14), ("operations", 40), ("changelog", 10)):
        files[f"docs/{title}.md"] = _doc(pkg, title.capitalize(), _rng(seed, "doc", title), size)
    files["logs/worker.log"] = _log(_rng(seed, "log", "worker"), log_lines, 12)
    files["logs/app.log"] = _log(_rng(seed, "log", "app"), log_lines // 20, 2)
    files["data/measurements.csv"] = _data(_rng(seed, "data"), data_rows)
    for fact in output_facts_for(seed):
        assert fact.script is not None
        files[fact.script] = _script(fact, _rng(seed, "script", fact.script))
    for reference in references_for(seed) if references else ():
        if reference.script is not None:
            files[reference.script] = _check_script(seed, reference)
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


# --- the user ----------------------------------------------------------------------------------------

_TASKS: dict[str, tuple[str, ...]] = {
    "feature": (
        "Add a bulk discount to the {module} module: look at how {module} computes its values first.",
        "Write more tests for {module} and run the whole test suite.",
        "Document the {module} module's timeout setting in docs/usage.md.",
        "Wire the new {module} behaviour into reports and check the tests still pass.",
        "Review src/{pkg}/{module}.py for edge cases with negative values and fix what you find.",
        "Run the tests and tell me whether anything fails.",
        "Explain how {module} and {other} interact.",
        "Add a changelog entry for the {module} changes.",
    ),
    "debug": (
        "The nightly job fails with a timeout. Look through logs/worker.log and find the errors.",
        "Which module raises the TimeoutError in logs/worker.log? Check its source.",
        "Grep the logs for ERROR lines and group them by module.",
        "Check data/measurements.csv for rows with status returned in the {module} region.",
        "Look at the first traceback in logs/worker.log and the matching code in {module}.",
        "Run the tests to see whether the {module} timeout is covered.",
        "Compare logs/app.log with logs/worker.log: do the same modules fail?",
        "Read the operations doc and tell me what it says about {module} timeouts.",
    ),
    "refactor": (
        "Add a comment on every public function in {module} and {other} saying it clamps negatives.",
        "Rename nothing yet, but find every use of the TIMEOUT_S constants across the package.",
        "Tidy the docstrings in {module}, {other} and {third}; keep the tests passing.",
        "Grep for 'value < 0' across src and review each clamp.",
        "Move the {module} notes into docs/architecture.md.",
        "Run the test suite after the refactor of {module}.",
        "Check every test file imports the package the same way.",
    ),
    "swe": (
        "Investigate the failing behaviour in {module}: reproduce with the tests, read the code, fix it.",
        "Find where {module} computes its result and check it against tests/test_{module}.py.",
        "Read data/measurements.csv and the parser module: does the parser handle every column?",
        "Search the codebase for the {module} offset and explain it.",
        "Run the full test suite and read the slowest module.",
    ),
}


def _fact_positions(turns: int, count: int, *, at_end: bool = False) -> tuple[list[int], list[int]]:
    """Turns where facts are stated (early) and asked (much later): a fact stated at turn s is asked
    at about s + 60% of the session, never before it was stated; `at_end`: in the last turns, the
    first fact stated asked in the very last."""
    stated = [min(turns - 1, 1 + 2 * i) for i in range(count)]
    if at_end:
        return stated, [turns - 1 - i for i in range(count)]
    asked = [min(turns - 1, s + max(1, (turns * 3) // 5)) for s in stated]
    return stated, asked


def reference_positions(turns: int, count: int, taken: set[int]) -> list[tuple[int, int]]:
    """(stated, asked) turns of `count` references, none in `taken` (the facts' turns) nor shared:
    stated early on even turns, asked about 60% of the session later (the next free turn); a
    reference that no longer fits the session is left out."""
    used = set(taken)
    out: list[tuple[int, int]] = []
    stated = 2
    for _ in range(count):
        while stated in used:
            stated += 2
        asked = stated + max(1, (turns * 3) // 5)
        while asked in used:
            asked += 1
        if asked >= turns:
            break
        used |= {stated, asked}
        out.append((stated, asked))
    return out


def planted_facts(seed: int, *, output_facts: bool = False) -> tuple[Fact, ...]:
    """Every fact a session of `seed` plants: the user's, then (when asked for) the scripts'."""
    return facts_for(seed) + (output_facts_for(seed) if output_facts else ())


def user_prompts(
    profile: str,
    turns: int,
    seed: int,
    *,
    output_facts: bool = False,
    facts_at_end: bool = False,
    references: bool = False,
) -> list[str]:
    """The prompts the profile's user types, one per turn.

    Args:
        profile: One of `PROFILES`.
        turns: How many turns (`--turns N`).
        seed: The session's seed.
        output_facts: Also have the scripts of `output_facts_for` run early and ask for their values
            late (interleaved with the user's own facts).
        facts_at_end: Ask for every fact in the last turns (the first one stated in the very last),
            so a long session shows what it still knows of its beginning at its end.
        references: Also refer back to earlier work (`references_for`, placed by
            `reference_positions` on turns no fact uses).

    Raises:
        ValueError: an unknown profile.
    """
    if profile not in _TASKS:
        raise ValueError(f"unknown profile {profile!r}; profiles: {', '.join(PROFILES)}")
    rng = _rng(seed, "user", profile)
    pkg = package_name(seed)
    tasks = _TASKS[profile]
    prompts = []
    for _ in range(turns):
        module, other, third = rng.sample(_MODULES, 3)
        template = tasks[rng.randrange(len(tasks))]
        prompts.append(template.format(module=module, other=other, third=third, pkg=pkg))
    facts = planted_facts(seed, output_facts=output_facts)
    stated, asked = _fact_positions(turns, len(facts), at_end=facts_at_end) if turns >= 4 else ([], [])
    for fact, at in zip(facts, stated, strict=False):
        if fact.script is not None:
            prompts[at] = fact.statement
            continue
        prompts[at] = f"{fact.statement} {prompts[at]}"
    for fact, at in zip(facts, asked, strict=False):
        if at > stated[facts.index(fact)] and at not in stated:
            prompts[at] = fact.question
    if references:
        kept = references_for(seed)
        for reference, (early, late) in zip(
            kept, reference_positions(turns, len(kept), {*stated, *asked}), strict=False
        ):
            prompts[early], prompts[late] = reference.statement, reference.question
    typed: set[str] = set()
    for turn, prompt in enumerate(prompts):
        if prompt in typed:
            # The model draws a turn's workload from its prompt alone, so every prompt of a session is
            # its own: a request typed again says which turn it is.
            prompts[turn] = f"{prompt} (turn {turn + 1})"
        typed.add(prompts[turn])
    return prompts
