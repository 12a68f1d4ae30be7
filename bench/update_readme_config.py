"""Rewrite the configuration table in docs/configuration.md from the Settings class (`make readme-config`)."""
from __future__ import annotations

from api.cli.main import settings_markdown
from bench.common import ROOT


def main() -> None:
    path = ROOT / "docs" / "configuration.md"
    lines = path.read_text(encoding="utf-8").split("\n")
    start = lines.index("| environment variable | default | meaning |")
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    lines[start:end] = settings_markdown().split("\n")
    path.write_text("\n".join(lines), encoding="utf-8")


if __name__ == "__main__":
    main()
