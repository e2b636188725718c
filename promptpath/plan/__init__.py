"""From argv, profile and environment to a frozen Plan: the option table, profiles, resolve."""
