"""writer."""
