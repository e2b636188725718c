"""The reference endpoint: a streaming AI API whose behaviour we control."""
