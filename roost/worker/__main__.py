import sys

from roost.worker.main import main

sys.exit(main())
