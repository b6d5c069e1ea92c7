"""Developer tools that are not part of the packages (mutation testing: tools/mutation)."""
