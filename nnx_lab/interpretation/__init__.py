"""The mistakes a model makes: confusion, top losses, residuals (issue 28)."""
