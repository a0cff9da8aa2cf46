"""The shared contract suite: every adapter must pass every test here."""
