#!/usr/bin/env python
"""Save the weights under one name prefix of a Detectron2 or MMEngine checkpoint to a new file.

    python tools/extract_weights.py output/pre/model_final.pth backbone.pth \\
        --prefix backbone.bottom_up.

Start other runs from that file: Detectron2 ``MODEL.WEIGHTS backbone.pth``; MMEngine
``model.backbone.init_cfg.type=Pretrained model.backbone.init_cfg.checkpoint=backbone.pth
model.backbone.init_cfg.prefix=backbone.``. The writer is
:func:`budgeted.safety.checkpoints.save_weights_subset` (the source is loaded as untrusted; an
existing destination is refused, never replaced). tools/evidence.sh uses it for the toy-pretrained
backbones of the evidence grid.
"""

from __future__ import annotations

import argparse
import sys

from budgeted.safety import save_weights_subset


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("src", help="a checkpoint (Detectron2 .pth/.pkl or MMEngine .pth)")
    parser.add_argument("dst", help="the file to write (must not exist)")
    parser.add_argument("--prefix", required=True, help="keep the weights whose names start so")
    args = parser.parse_args(argv)
    try:  # MMEngine's checkpoints name its HistoryBuffer: allow it where MMEngine is installed
        from budgeted.mmengine.checkpoint import MMENGINE_EXTRA_GLOBALS as extra
    except ImportError:
        extra = {}
    try:
        count = save_weights_subset(args.src, args.dst, args.prefix, extra_globals=extra)
    except ValueError as err:
        print(f"extract_weights: error: {err}", file=sys.stderr)
        return 2
    print(f"{count} tensors under {args.prefix!r} written to {args.dst}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
