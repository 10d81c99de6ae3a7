# Two stack blocks.
stack "s" {}
stack "t" {}
