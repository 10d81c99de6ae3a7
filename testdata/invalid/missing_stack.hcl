# No stack block at all.
provider "sim" {}
