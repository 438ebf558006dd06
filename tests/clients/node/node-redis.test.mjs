// node-redis with its default settings (RESP3): see node-redis.suite.mjs.
import { nodeRedisSuite } from './node-redis.suite.mjs';

nodeRedisSuite(undefined);
