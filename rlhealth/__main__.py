from rlhealth.cli import main

raise SystemExit(main())
