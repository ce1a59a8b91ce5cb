import sys
from pathlib import Path

# tests/corpus is a helper package for the corpus tests and bench/corpus_report.py.
sys.path.insert(0, str(Path(__file__).parent))
