"""Who a connection is: principals (here), authentication (TLS, SASL) and
authorization (ACLs) beside it. The network layer gives every connection a
``principal``; handlers read it through ``RequestContext.principal``.
"""
