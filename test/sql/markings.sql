--
-- Every function's volatility, strictness and parallel safety, chosen on
-- purpose, and a comment for each.
--
SELECT p.oid::regprocedure AS function,
	   CASE p.provolatile WHEN 'i' THEN 'immutable' WHEN 's' THEN 'stable' ELSE 'volatile' END AS volatility,
	   p.proisstrict AS strict,
	   CASE p.proparallel WHEN 's' THEN 'safe' WHEN 'r' THEN 'restricted' ELSE 'unsafe' END AS parallel,
	   obj_description(p.oid, 'pg_proc') IS NOT NULL AS has_comment
FROM pg_proc p
JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'snowflake'
ORDER BY p.oid::regprocedure::text;

SELECT obj_description('snowflake_status'::regclass, 'pg_class') IS NOT NULL AS view_has_comment;
