# A misspelled top-level block.
stack "s" {}
grop "g" {}
