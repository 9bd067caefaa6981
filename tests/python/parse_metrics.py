"""Parses Prometheus text exposition read on stdin with the reference parser (prometheus_client)
and prints one JSON object: {"families": [{name, type, help}], "samples": [{name, labels, value}]}.

Exits 1 with the parser's error on stderr when the text does not parse, so that a test fails on
any exposition that Prometheus itself would reject.
"""

import json
import math
import sys

from prometheus_client.parser import text_string_to_metric_families


def main() -> int:
    text = sys.stdin.read()
    families = []
    samples = []
    try:
        for family in text_string_to_metric_families(text):
            families.append(
                {"name": family.name, "type": family.type, "help": family.documentation}
            )
            for sample in family.samples:
                value = sample.value
                samples.append(
                    {
                        "name": sample.name,
                        "labels": dict(sample.labels),
                        # JSON has no infinities: keep them as Prometheus spells them.
                        "value": value if math.isfinite(value) else repr(value),
                    }
                )
    except Exception as error:  # the parser raises ValueError and others on bad input
        print(f"the metrics text does not parse: {error!r}", file=sys.stderr)
        return 1
    print(json.dumps({"families": families, "samples": samples}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
