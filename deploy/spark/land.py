"""spark-submit's script for `binlake land` (the image's /opt/binlake/land.py, and deploy/spark/submit.sh).

Not streaming_job/main.py itself: Python puts a script's own directory first on sys.path, and
streaming_job/ holds a delta/ package that then shadows delta-spark's `delta` (as a types.py once shadowed
the standard library's `types`: ImportError at start).
From here, streaming_job is imported as the installed package.
"""

import sys

from streaming_job.main import main

if __name__ == "__main__":
    sys.exit(main())
