# A second process of one provider needs an alias.
stack "s" {}
provider "sim" {}
provider "sim" {}
