-- CreateIndex: the IP policy rules as the ingress reads them at start (HotReads.ipRuleLines,
-- server/store/hot-sqlite.ts): each rule's id, policy, CIDR and action in id order, so a
-- million rules are read from this index alone instead of each row's JSON document (0.7
-- instead of 1.6 CPU seconds; about 107 MB per million rules; bench/README.md). Partial:
-- other kinds have no entry. The expressions must stay exactly those of the statement.
CREATE INDEX "Resource_ip_rule_idx" ON "Resource"("kind", "id", "parentId", ("data" ->> '$.body.cidr'), ("data" ->> '$.body.action')) WHERE "kind" = 'IPPolicyRule';
