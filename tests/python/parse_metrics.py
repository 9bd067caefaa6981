"""Parses metrics read on stdin with the reference parsers (prometheus_client) and prints one
JSON object: {"families": [{name, type, help}], "samples": [{name, labels, value, exemplar}]}.

Without arguments the text is Prometheus text exposition; with `--openmetrics` it is OpenMetrics
text, read by prometheus_client's OpenMetrics parser (which also reads exemplars, and requires
the closing `# EOF`). `exemplar` is null, or {labels, value, timestamp} (seconds, a float).

Exits 1 with the parser's error on stderr when the text does not parse, so that a test fails on
any exposition that Prometheus itself would reject.
"""

import json
import math
import sys

from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families


def number(value):
    # JSON has no infinities: keep them as Prometheus spells them.
    return value if math.isfinite(value) else repr(value)


def exemplar_of(sample):
    exemplar = getattr(sample, "exemplar", None)
    if exemplar is None:
        return None
    timestamp = exemplar.timestamp
    if timestamp is not None and not isinstance(timestamp, (int, float)):
        timestamp = timestamp.sec + timestamp.nsec / 1e9
    return {
        "labels": dict(exemplar.labels),
        "value": number(exemplar.value),
        "timestamp": timestamp,
    }


def main() -> int:
    openmetrics = sys.argv[1:] == ["--openmetrics"]
    if sys.argv[1:] and not openmetrics:
        print(f"unknown arguments {sys.argv[1:]}; the one option is --openmetrics", file=sys.stderr)
        return 2
    parse = openmetrics_families if openmetrics else text_string_to_metric_families
    text = sys.stdin.read()
    families = []
    samples = []
    try:
        for family in parse(text):
            families.append(
                {"name": family.name, "type": family.type, "help": family.documentation}
            )
            for sample in family.samples:
                samples.append(
                    {
                        "name": sample.name,
                        "labels": dict(sample.labels),
                        "value": number(sample.value),
                        "exemplar": exemplar_of(sample),
                    }
                )
    except Exception as error:  # the parsers raise ValueError and others on bad input
        print(f"the metrics text does not parse: {error!r}", file=sys.stderr)
        return 1
    print(json.dumps({"families": families, "samples": samples}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
