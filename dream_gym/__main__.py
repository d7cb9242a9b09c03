from dream_gym.cli import main

raise SystemExit(main())
