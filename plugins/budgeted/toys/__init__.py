"""Toy and small real datasets, written in the formats the frameworks read."""
