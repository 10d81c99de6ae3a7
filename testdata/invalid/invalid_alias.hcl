# An alias has to be usable in a reference.
stack "s" {}
provider "sim" { alias = "nfs auth" }
