"""Common English words, for the lint rule "key is a substring of common words".

A hand-picked list of frequent English words (function words, frequent verbs, nouns and
adjectives of narrative prose). Lint flags a plain key matched without whole words when it
occurs inside one of these words (``art`` in ``start``, ``Ei`` in ``their``).
"""

from __future__ import annotations

COMMON_WORDS: tuple[str, ...] = tuple("""
the be to of and a in that have it for not on with he as you do at this but his by from they we say
her she or an will my one all would there their what so up out if about who get which go me when make
can like time no just him know take people into year your good some could them see other than then now
look only come its over think also back after use two how our work first well way even new want because
any these give day most us is are was were been has had did said made went got came told asked seemed
left thought looked called tried turned became began kept felt brought stood heard let meant set put
ran held
man woman child world life hand part place case week company system program question government number
night point home water room mother area money story fact month lot right study book eye job word
business issue side kind head house service friend father power hour game line end member law car city
community name president team minute idea kid body information school face others level office door
health person art war history party result change morning reason research girl guy moment air teacher
force education foot boy age policy everything process music market sense nation plan college interest
death experience effect class control care field development role effort rate heart drug show leader
light voice wife police mind price report decision son view relationship town road arm difference value
building action model season society tax director position player record paper space ground form event
official matter center couple site project activity star table need court oil situation cost industry
figure street image phone data picture practice piece land product doctor wall patient worker news test
movie north love support technology step baby computer type attention film tree source organization
hair window evidence population site truth dragon sword castle king queen forest river mountain village
magic spell shadow fire ice stone gold silver blood bone dream memory journey battle warrior knight
weapon armor shield horse wolf beast demon angel spirit soul god goddess temple church tower bridge
market harbor ship sea ocean island desert storm wind rain snow sun moon sky cloud darkness light
great little own old big high different small large next early young important few public bad same
able last long best better sure free true whole real full special easy clear recent certain personal
open red difficult available likely short single medical current wrong private past foreign fine
common poor natural significant similar hot dead central happy serious ready simple left physical
general environmental financial blue democratic dark various entire close legal religious cold final
main green nice huge popular traditional cultural heavy quiet strange ancient beautiful gentle
always never often sometimes usually again still already almost around away down here however just
later maybe much nothing once perhaps quite rather really since soon something somewhere than together
too very where while yet without within upon toward against between through during before under
above behind beside beyond inside outside across along among because although unless until whether
start started starting smart party parts heart earth search learn early year years hear heard
hearth dearth apart depart partner particular particle artist article artifact martial marble
carpet garden harden warden pardon burden certain curtain mountain fountain captain bargain
other another mother brother rather father either neither whether together weather feather leather
being their theirs reign foreign height weight eight neighbor receive deceive ceiling leisure seize
nothing thing things think thinking thank anything everything something nowhere somehow someone
inform information formal format normal former forward toward awkward reward
interest interesting internal international internet interval interview interrupt
mention attention intention question station nation relation creation location vacation
""".split())
