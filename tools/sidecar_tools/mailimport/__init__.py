"""``sidecar import``: a user's own mail (mbox, Maildir, .eml folder) into the store, indexed."""
