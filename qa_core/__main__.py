import sys

from qa_core.cli import main

sys.exit(main())
