"""Rate limits and waves, apart from the rest: how wide to dispatch, and what failures teach.

The pure wave scheduler (``scheduler``) and what a merged run teaches it
(``learning``); limits with source and confidence (``limits``); settings and
glue (``pacing``); learned state per provider+model, outside any repository
(``learned``), what one audit's word may teach it (``claims``) and where each limit came from
(``provenance``); what a packet's usage says (``calibration``); rate-limit signals in headers and error
texts (``ratelimits``);
failure classes (``failures``); the optional provider probe (``probe``); and
packet leases (``leases``).

May import: ``store``, ``core``. Never ``engine``, ``findings``, ``usecases``
or ``surfaces``.
"""
