"""ssl.principal.mapping.rules: Kafka's SslPrincipalMapperTest cases."""

import pytest

from kfast.security.principal_mapping import NoMatchingRule, SslPrincipalMapper

RULES = (
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U,DEFAULT"
)


@pytest.mark.parametrize(
    "dn,name",
    [
        ("CN=kafka-server1,OU=ServiceUsers,O=Org,L=City,ST=State,C=US", "kafka-server1"),
        ("CN=Duke,OU=SME,O=mycp,L=Fqdn,ST=CA,C=US", "duke@sme"),
        ("CN=kafka1,OU=SME,O=mycp,L=Fqdn,ST=CA", "KAFKA1"),
        ("OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US"),
    ],
)
def test_rules_apply_in_order(dn, name):
    assert SslPrincipalMapper(RULES).name(dn) == name


def test_escaped_slash_and_back_references():
    mapper = SslPrincipalMapper(r"RULE:^CN=(.*),O=(.*)$/$2\/$1/")
    assert mapper.name("CN=a,O=b") == "b/a"
    # $3 with two groups loses its digit until it names a group: literal text stays.
    assert SslPrincipalMapper("RULE:^CN=(.*)$/x$0y/").name("CN=z") == "x$0y"


def test_no_matching_rule_and_invalid_rules():
    with pytest.raises(NoMatchingRule):
        SslPrincipalMapper("RULE:^CN=(.*)$/$1/").name("O=x")
    for bad in ("RULE:foo", "RULE:a/b/Q", "DEFAULTS"):
        with pytest.raises(ValueError):
            SslPrincipalMapper(bad)
