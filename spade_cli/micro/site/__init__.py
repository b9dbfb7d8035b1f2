"""The modules the sandbox adds to the jail's path (`spade_micro`, the micro world's families)."""
