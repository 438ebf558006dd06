// node-redis with `RESP: 2`, the RESP2 run of node-redis.suite.mjs.
import { nodeRedisSuite } from './node-redis.suite.mjs';

nodeRedisSuite(2);
