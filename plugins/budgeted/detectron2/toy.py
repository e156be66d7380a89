"""A deterministic synthetic instance-segmentation set in the real COCO json format.

Each image holds 1-3 filled shapes (square, circle, triangle) on a noisy background; each shape is
one annotation with its polygon mask, box and area. The same arguments give the same bytes.
The writer lives in the framework-free :mod:`budgeted.toys.coco` (MMDetection's toy configs read
the same set); this module keeps its Detectron2-side name.

Example:
    >>> import tempfile
    >>> sorted(make_toy_coco(tempfile.mkdtemp(), num_train=2, num_val=1, size=32))
    ['toy_coco_train', 'toy_coco_val']
"""

from __future__ import annotations

from ..toys.coco import make_toy_coco

__all__ = ["make_toy_coco"]
