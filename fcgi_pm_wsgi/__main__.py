"""`python3 -m fcgi_pm_wsgi`, or a zipapp of the package (python3 -m zipapp)."""

import sys

from fcgi_pm_wsgi.main import main

sys.exit(main())
