"""cutecourse: support package for the CuTe DSL course."""
