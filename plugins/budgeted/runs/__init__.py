"""Run folders: what each training tool's output folder holds, read as data (never run)."""
