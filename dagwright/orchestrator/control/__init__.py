"""Run control: submitting, cancelling, approving and replaying, as people and programs ask."""
