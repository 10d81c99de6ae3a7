# A provider named group would make group.x ambiguous.
stack "s" {}
provider "group" {}
